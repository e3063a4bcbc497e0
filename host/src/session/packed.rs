//! Packed chunk rows, as the TypeScript harness writes them.
//!
//! A run of streaming chunk events is stored as one row:
//! `reasoning-chunks` / `text-chunks` with `texts`, `tool-call-chunks` with
//! `id`, `name` and `args`, plus `turn`, `step`, `index`, and `dt`, the
//! millisecond gaps between consecutive chunks (one fewer than the chunks).
//! The row's first seq and time are `seq0`/`time0` (on the envelope or in
//! `data`), or, when absent, the row's position and 0. Reading expands a row
//! into consecutive `assistant/chunk` events:
//! `{"turn","step","chunk":{"type":"reasoning-delta"|"text-delta","index","text"}}` or
//! `{"turn","step","chunk":{"type":"tool-call-delta","index","id","name","argumentsDelta"}}`.

use serde::Serialize;
use serde_json::Value;

use super::event::{to_raw, Event};

/// The packed row types.
pub const PACKED_TYPES: [&str; 3] = ["reasoning-chunks", "text-chunks", "tool-call-chunks"];

/// Whether `kind` is a packed chunk row.
pub fn is_packed(kind: &str) -> bool {
    PACKED_TYPES.contains(&kind)
}

#[derive(Serialize)]
struct Chunk<'a> {
    turn: &'a Value,
    step: &'a Value,
    chunk: ChunkBody<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ChunkBody<'a> {
    Text {
        #[serde(rename = "type")]
        kind: &'static str,
        index: &'a Value,
        text: &'a Value,
    },
    ToolCall {
        #[serde(rename = "type")]
        kind: &'static str,
        index: &'a Value,
        id: &'a Value,
        name: &'a Value,
        #[serde(rename = "argumentsDelta")]
        arguments_delta: &'a Value,
    },
}

/// Expands one packed row. `seq0`/`time0` are the envelope's; the row's data
/// may carry them instead.
///
/// # Errors
/// What is malformed about the row.
pub fn expand(kind: &str, data: &str, seq0: Option<u64>, time0: Option<u64>, position: u64) -> Result<Vec<Event>, String> {
    let data: Value = serde_json::from_str(data).map_err(|e| format!("{kind} row data is not JSON: {e}"))?;
    let items_key = if kind == "tool-call-chunks" { "args" } else { "texts" };
    let items = data.get(items_key).and_then(Value::as_array).ok_or_else(|| format!("{kind} row has no `{items_key}` array"))?;
    let dt = data.get("dt").and_then(Value::as_array).ok_or_else(|| format!("{kind} row has no `dt` array"))?;
    if !items.is_empty() && dt.len() + 1 != items.len() {
        return Err(format!("{kind} row has {} chunks but {} time gaps (expected {})", items.len(), dt.len(), items.len() - 1));
    }
    let seq0 = seq0.or_else(|| data.get("seq0").and_then(Value::as_u64)).unwrap_or(position);
    let mut time = time0.or_else(|| data.get("time0").and_then(Value::as_u64)).unwrap_or(0);
    let null = Value::Null;
    let field = |k: &str| data.get(k).unwrap_or(&null);
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            let gap = dt[i - 1].as_u64().ok_or_else(|| format!("{kind} row: dt[{}] is not a whole number of ms", i - 1))?;
            time = time.saturating_add(gap);
        }
        let chunk = match kind {
            "tool-call-chunks" => ChunkBody::ToolCall {
                kind: "tool-call-delta",
                index: field("index"),
                id: field("id"),
                name: field("name"),
                arguments_delta: item,
            },
            "reasoning-chunks" => ChunkBody::Text { kind: "reasoning-delta", index: field("index"), text: item },
            _ => ChunkBody::Text { kind: "text-delta", index: field("index"), text: item },
        };
        out.push(Event {
            seq: seq0 + i as u64,
            time,
            kind: "assistant/chunk".into(),
            data: to_raw(&Chunk { turn: field("turn"), step: field("step"), chunk }),
            surface_op: None,
            source_event_seqs: None,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_rows_with_times_and_seqs() {
        let events = expand(
            "tool-call-chunks",
            r#"{"turn":1,"step":2,"index":1,"dt":[5,0],"id":"c1","name":"read","args":["{","\"a\"","}"]}"#,
            Some(10),
            Some(1000),
            3,
        )
        .unwrap();
        assert_eq!(events.len(), 3);
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![10, 11, 12]);
        assert_eq!(events.iter().map(|e| e.time).collect::<Vec<_>>(), vec![1000, 1005, 1005]);
        assert_eq!(
            events[1].data.get(),
            r#"{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"read","argumentsDelta":"\"a\""}}"#
        );
        let text = expand("text-chunks", r#"{"turn":1,"step":1,"index":0,"dt":[],"texts":["hi"]}"#, None, None, 7).unwrap();
        assert_eq!(text[0].seq, 7);
        assert_eq!(text[0].data.get(), r#"{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"hi"}}"#);
        assert!(expand("text-chunks", r#"{"dt":[1,2],"texts":["a"]}"#, None, None, 0).is_err());
    }
}
