//! Arbitrary bytes as a session file: `parse_log` reads it (or refuses its
//! header), replay checks the structure rules, and the history derived for a
//! model is always well-formed: every tool call of an assistant message is
//! answered by exactly one tool result right after that message, and no
//! result is without its call. No input may panic. Each problem names a
//! line of the file, and every event read writes back to a line that reads
//! as the same event.

#![no_main]

use std::path::Path;
use std::sync::Arc;

use cordis_session::projection::Projections;
use cordis_session::store::parse_log;
use cordis_session::{derive_messages, Backing, EventTypes, Message, Session};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(log) = parse_log(data, Path::new("fuzz.jsonl")) else { return };
    let lines = data.split(|&b| b == b'\n').count().max(1);
    for event in &log.events {
        let line = event.to_line();
        let again = parse_log(format!("{{\"type\":\"session\",\"version\":0,\"id\":\"x\"}}\n{line}").as_bytes(), Path::new("x"))
            .expect("a header we wrote reads back");
        assert_eq!(again.events.len(), 1, "{line:?} does not read back: {:?}", again.problems);
        assert_eq!(again.events[0].data.get(), event.data.get());
        assert_eq!(again.events[0].kind, event.kind);
    }
    let (session, problems) =
        Session::replay(log, Backing::ReadOnly, Arc::new(EventTypes::default()), Arc::new(Projections::default()));
    for p in &problems {
        assert!(p.line >= 1 && p.line <= lines, "problem on line {} of {lines}: {}", p.line, p.message);
    }
    let messages = session.with_events(derive_messages);
    let mut awaiting: Vec<&str> = Vec::new();
    for m in &messages {
        match m {
            Message::Tool { call_id, .. } => {
                let i = awaiting.iter().position(|c| c == call_id).expect("a tool result without its call");
                awaiting.remove(i);
            }
            other => {
                assert!(awaiting.is_empty(), "calls without results");
                if let Message::Assistant { tool_calls, .. } = other {
                    awaiting.extend(tool_calls.iter().map(|c| c.id.as_str()));
                }
            }
        }
    }
    assert!(awaiting.is_empty(), "calls without results at the end");
});
