//! Our session log format, one JSON document per line: the header, then
//! one event per line. The flat store reads its files with it and the
//! PostgreSQL store its rows.

use std::path::Path;

use crate::event::{raw_null, Envelope, Event, Header, SurfaceOp};
use crate::json::{replace_lone_surrogates, RawJson};

use super::{LineProblem, ReadLog, StoreError};

/// Parses the bytes of a session file (see [`super::read_file`]).
///
/// # Errors
/// [`StoreError::BadHeader`].
pub fn parse_log(bytes: &[u8], path: &Path) -> Result<ReadLog, StoreError> {
    parse_whole(bytes, path).map(|(log, _)| log)
}

/// Where a parse of a log's lines stopped, and what the next line's parse
/// must know: the number of the last line read, the `seq` due next, and
/// whether an event was read before (the first event may start at any
/// `seq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct LineState {
    /// The last line read (1 = the header).
    pub line: usize,
    /// The `seq` due next.
    pub next_seq: u64,
    /// Whether any event was read.
    pub any: bool,
    /// Bytes consumed: through the last line read, its newline included
    /// (or through a last whole record that lacks its newline).
    pub consumed: u64,
    /// The last line read lacked its newline (a whole last record kept).
    pub open_line: bool,
}

impl LineState {
    /// The state after whole lines holding `events` events, the last of
    /// seq `last_seq`, the last line being `line` (bytes are counted from
    /// there).
    #[cfg(feature = "postgres")]
    pub fn after(line: usize, events: usize, last_seq: Option<u64>) -> LineState {
        LineState { line, next_seq: last_seq.map_or(0, |s| s.saturating_add(1)), any: events > 0, consumed: 0, open_line: false }
    }
}

/// [`parse_log`], and where it stopped.
pub(crate) fn parse_whole(bytes: &[u8], path: &Path) -> Result<(ReadLog, LineState), StoreError> {
    let shown = path.display().to_string();
    let mut out = Lines::default();
    let mut state = LineState::default();
    let header = parse_lines(bytes, &mut state, &mut out, Mode::Whole).map_err(|detail| StoreError::BadHeader { path: shown.clone(), detail })?;
    let header = match header {
        Some(h) => h,
        None if out.torn.is_some() => return Err(StoreError::BadHeader { path: shown, detail: "the header line is incomplete".into() }),
        None => return Err(StoreError::BadHeader { path: shown, detail: "the file is empty".into() }),
    };
    let Lines { events, lines, problems, torn, unterminated } = out;
    Ok((ReadLog { header, events, lines, problems, torn, unterminated }, state))
}

/// The lines of a log after its header, parsed from where `state` left
/// off: `bytes` start right after the `state.consumed` bytes already read.
/// A last line without its newline is read when it is a whole record (as a
/// whole read keeps it) and reported as torn otherwise; `state` moves past
/// what was read. `None` when the bytes cannot follow what was read: a
/// last record read without its newline is followed by anything but the
/// newline (the file was not appended to, but changed).
pub(crate) fn parse_appended(mut bytes: &[u8], state: &mut LineState) -> Option<Lines> {
    if state.open_line && !bytes.is_empty() {
        bytes = bytes.strip_prefix(b"\n")?;
        state.open_line = false;
        state.consumed += 1;
    }
    let mut out = Lines::default();
    // After the header, no line is parsed as one: this cannot fail.
    let _ = parse_lines(bytes, state, &mut out, Mode::After);
    Some(out)
}

/// What a parse of lines found.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    pub events: Vec<Event>,
    pub lines: Vec<usize>,
    pub problems: Vec<LineProblem>,
    pub torn: Option<(usize, u64)>,
    pub unterminated: Option<usize>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// From the start: line 1 is the header.
    Whole,
    /// After the header.
    After,
}

/// Parses `bytes` line by line from `state` into `out`; returns the header
/// when `mode` is [`Mode::Whole`] and line 1 held one, or what is wrong
/// with line 1.
fn parse_lines(bytes: &[u8], state: &mut LineState, out: &mut Lines, mode: Mode) -> Result<Option<Header>, String> {
    let Lines { events, lines, problems, torn, unterminated } = out;
    let mut header: Option<Header> = None;
    let mut need_header = mode == Mode::Whole;
    let base = state.consumed;
    let mut offset = 0usize;
    let mut line_no = state.line;
    let mut next_seq = state.next_seq;
    let mut any = state.any;
    let mut crlf_lines = 0usize;
    let mut crlf_first: Option<usize> = None;
    while offset < bytes.len() {
        line_no += 1;
        let (raw, complete) = match memchr::memchr(b'\n', &bytes[offset..]) {
            Some(n) => (&bytes[offset..offset + n], true),
            None => (&bytes[offset..], false),
        };
        let start = offset;
        offset += raw.len() + usize::from(complete);
        if !complete {
            // A whole record without its newline is kept; anything else at
            // the end is a record cut mid-write.
            let whole = std::str::from_utf8(raw).is_ok_and(|t| {
                let repaired = replace_lone_surrogates(t);
                let t = repaired.as_ref().map_or(t, |r| r.text.as_str());
                if need_header {
                    serde_json::from_str::<Header>(t).is_ok()
                } else {
                    serde_json::from_str::<Envelope>(t).is_ok()
                }
            });
            if !whole {
                *torn = Some((line_no, base + start as u64));
                line_no -= 1;
                offset = start;
                break;
            }
            *unterminated = Some(line_no);
        }
        let raw = match raw.strip_suffix(b"\r") {
            Some(stripped) if complete => {
                crlf_lines += 1;
                crlf_first.get_or_insert(line_no);
                stripped
            }
            Some(stripped) => stripped,
            None => raw,
        };
        if need_header {
            let parsed = std::str::from_utf8(raw)
                .map_err(|e| e.to_string())
                .and_then(|text| {
                    let repaired = replace_lone_surrogates(text);
                    let header = serde_json::from_str::<Header>(repaired.as_ref().map_or(text, |r| r.text.as_str())).map_err(|e| e.to_string());
                    if let (Ok(_), Some(repair)) = (&header, &repaired) {
                        problems.push(LineProblem::note(line_no, repair.describe()));
                    }
                    header
                })
                .and_then(|h| match (h.kind.as_str(), h.version) {
                    ("session", 0) => Ok(h),
                    ("session", v) => Err(format!("format version {v} is not supported (this host reads version 0)")),
                    (other, _) => Err(format!("type is `{other}`, expected `session`")),
                });
            header = Some(parsed?);
            need_header = false;
            continue;
        }
        if raw.iter().all(|b| b.is_ascii_whitespace()) {
            if !raw.is_empty() {
                problems.push(LineProblem::skipped(line_no, "blank line"));
            }
            continue;
        }
        if raw.contains(&0) {
            problems.push(LineProblem::skipped(line_no, "the line contains NUL bytes"));
            continue;
        }
        let text = match std::str::from_utf8(raw) {
            Ok(t) => t,
            Err(e) => {
                problems.push(LineProblem::skipped(line_no, format!("not UTF-8 text: {e}")));
                continue;
            }
        };
        let repaired = replace_lone_surrogates(text);
        let text = repaired.as_ref().map_or(text, |r| r.text.as_str());
        let records = match serde_json::from_str::<Envelope>(text) {
            Ok(env) => vec![env],
            Err(e) => match split_glued(text) {
                Some(records) => {
                    problems.push(LineProblem::note(
                        line_no,
                        format!("{} records on one line (a missing newline); each is read and kept", records.len()),
                    ));
                    records
                }
                None => {
                    problems.push(LineProblem::skipped(line_no, describe_bad_event(text, &e)));
                    continue;
                }
            },
        };
        if let Some(repair) = &repaired {
            problems.push(LineProblem::note(line_no, repair.describe()));
        }
        for env in records {
            if crate::packed::is_packed(&env.kind) {
                let data = env.data.as_ref().map_or("null", |d| d.get());
                match crate::packed::expand(&env.kind, data, env.seq0, env.time0, next_seq) {
                    Ok(expanded) => {
                        if let Some(last) = expanded.last() {
                            next_seq = last.seq.saturating_add(1);
                            any = true;
                        }
                        lines.extend(std::iter::repeat_n(line_no, expanded.len()));
                        events.extend(expanded);
                    }
                    Err(message) => problems.push(LineProblem::skipped(line_no, message)),
                }
                continue;
            }
            let seq = env.seq.unwrap_or(next_seq);
            if let Some(message) = seq_problem(seq, next_seq, !any) {
                problems.push(LineProblem::broken(line_no, message));
            }
            next_seq = seq.saturating_add(1);
            any = true;
            events.push(Event {
                seq,
                time: env.time.unwrap_or(0),
                kind: env.kind,
                data: env.data.map_or_else(raw_null, RawJson::from),
                surface_op: env.surface_op.map(SurfaceOp::from_raw),
                source_event_seqs: env.source_event_seqs,
            });
            lines.push(line_no);
        }
    }
    if let Some(first) = crlf_first {
        problems.push(LineProblem::note(
            first,
            format!(
                "{} ended by CRLF (first here); read as LF line ends, every record as written; appends end lines with LF",
                if crlf_lines == 1 { "1 line is".to_string() } else { format!("{crlf_lines} lines are") }
            ),
        ));
    }
    *state = LineState { line: line_no, next_seq, any, consumed: base + offset as u64, open_line: unterminated.is_some() && torn.is_none() };
    Ok(header)
}

/// What is wrong with an event's `seq` when `expected` was due (`None`:
/// nothing). The first event may start anywhere.
fn seq_problem(seq: u64, expected: u64, first: bool) -> Option<String> {
    if first || seq == expected {
        return None;
    }
    let previous = expected.wrapping_sub(1);
    Some(if seq > expected {
        let last_missing = seq - 1;
        if last_missing == expected {
            format!("seq {seq} follows {previous}: a gap, seq {expected} is missing (the events after it are kept)")
        } else {
            format!("seq {seq} follows {previous}: a gap from {expected} to {last_missing} (the events after it are kept)")
        }
    } else {
        format!("seq {seq} follows {previous}: a duplicate or out-of-order seq (kept)")
    })
}

/// A line holding several whole records glued together (a newline lost
/// between them): each record, when every part of the line is one.
fn split_glued(text: &str) -> Option<Vec<Envelope>> {
    let mut records = Vec::new();
    for record in serde_json::Deserializer::from_str(text).into_iter::<Envelope>() {
        records.push(record.ok()?);
    }
    (records.len() >= 2).then_some(records)
}

fn describe_bad_event(text: &str, e: &serde_json::Error) -> String {
    let message = e.to_string();
    if message.contains("unknown field") {
        // serde's message already lists the expected keys.
        return format!("not a valid event: {message}");
    }
    if message.contains("trailing characters") && text.contains("}{") {
        return format!("two records glued on one line ({message})");
    }
    format!("not a valid event: {message}")
}

/// A parsed data text, or the error that says why it is not JSON.
///
/// # Errors
/// The JSON parser's message.
pub fn parse_data(text: &str) -> Result<RawJson, String> {
    RawJson::parse(text).map_err(|e| format!("event data is not JSON: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{derive_history, Message};
    use crate::store::ProblemKind;

    const HEADER: &str = "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\n";

    fn user(seq: u64, text: &str) -> String {
        format!(
            "{{\"seq\":{seq},\"time\":1,\"type\":\"user/message\",\"data\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}},\"surfaceOp\":\"append\"}}\n"
        )
    }

    #[test]
    fn lone_surrogates_are_read_as_the_replacement_character_and_noted() {
        let text = [
            HEADER.to_string(),
            "{\"seq\":0,\"time\":1,\"type\":\"turn/start\",\"data\":{\"turn\":1}}\n".into(),
            user(1, r"half \ud83e here"),
            user(2, r"low \udd14, end \ud83e"),
            user(3, r"pair \ud83e\udd14"),
            // A lone half in the type, and in a record cut short at the end.
            "{\"seq\":4,\"time\":1,\"type\":\"x/\\ud83e\",\"data\":null}\n".into(),
            user(5, r"two \ud83e\ud83e\udd14").trim_end().to_string(),
        ]
        .concat();
        let log = parse_log(text.as_bytes(), Path::new("s.jsonl")).unwrap();
        assert_eq!(log.events.len(), 6, "{:?}", log.problems);
        assert_eq!(log.unterminated, Some(7));
        let notes: Vec<(usize, ProblemKind)> = log.problems.iter().map(|p| (p.line, p.kind)).collect();
        assert_eq!(notes, [(3, ProblemKind::Note), (4, ProblemKind::Note), (6, ProblemKind::Note), (7, ProblemKind::Note)]);
        assert!(log.problems[0].message.contains(r"`\ud83e`") && log.problems[0].message.contains("U+FFFD"), "{}", log.problems[0].message);
        assert!(log.problems[1].message.starts_with("2 lone UTF-16 surrogate escapes (first `\\udd14`"), "{}", log.problems[1].message);
        assert_eq!(log.events[4].kind, "x/\u{FFFD}");
        // The pair on line 5 is kept as written.
        assert!(log.events[3].data.get().contains(r"\ud83e\udd14"));

        let (messages, notes) = derive_history(&log.events);
        assert!(notes.is_empty(), "{notes:?}");
        let texts: Vec<&str> = messages
            .iter()
            .map(|m| match m {
                Message::User { text } => text.as_str(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(texts, ["half \u{FFFD} here", "low \u{FFFD}, end \u{FFFD}", "pair \u{1F914}", "two \u{FFFD}\u{1F914}"]);
        // What a model is sent is valid JSON text, and reads back the same.
        let sent = serde_json::to_string(&messages).unwrap();
        assert_eq!(serde_json::from_str::<Vec<serde_json::Value>>(&sent).unwrap().len(), 4);
    }

    #[test]
    fn a_lone_surrogate_in_the_header_is_read_and_noted() {
        let text = "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1,\"cwd\":\"/home/\\udc00\"}\n";
        let log = parse_log(text.as_bytes(), Path::new("s.jsonl")).unwrap();
        assert_eq!(log.header.cwd.as_deref(), Some("/home/\u{FFFD}"));
        assert_eq!(log.problems.iter().map(|p| (p.line, p.kind)).collect::<Vec<_>>(), [(1, ProblemKind::Note)]);
    }

    #[test]
    fn negative_times_are_read_as_written() {
        let text = concat!(
            "{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\n",
            "{\"seq\":0,\"time\":-960585284,\"type\":\"a\",\"data\":{}}\n",
            "{\"type\":\"text-chunks\",\"seq0\":1,\"time0\":1700000000100,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[-2378304174,28],\"texts\":[\"a\",\"b\",\"c\"]}}\n",
            "{\"type\":\"text-chunks\",\"seq0\":4,\"time0\":-5,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[-1],\"texts\":[\"d\",\"e\"]}}\n",
        );
        let log = parse_log(text.as_bytes(), Path::new("s.jsonl")).unwrap();
        assert!(log.problems.is_empty(), "{:?}", log.problems);
        let times: Vec<i64> = log.events.iter().map(|e| e.time).collect();
        assert_eq!(times, [-960_585_284, 1_700_000_000_100, 1_697_621_695_926, 1_697_621_695_954, -5, -6]);
        assert!(log.events[0].to_line().starts_with("{\"seq\":0,\"time\":-960585284,"));
    }
}
