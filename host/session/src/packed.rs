//! Packed chunk rows, as the TypeScript harness writes them.
//!
//! A run of streaming chunk events is stored as one row:
//! `reasoning-chunks` / `text-chunks` with `texts`, `tool-call-chunks` with
//! `id`, `name` and `args`, plus `turn`, `step`, `index`, and `dt`, the
//! millisecond gaps between consecutive chunks (one fewer than the chunks).
//! The row's first seq and time are `seq0`/`time0` (on the envelope or in
//! `data`), or, when absent, the row's position and 0. Times and gaps are
//! JavaScript's safe integers (at most 2^53 - 1 either side of 0), as the
//! harness checks them: a gap is negative when the clock stepped back
//! during a run, and `time0` may be before the epoch. Reading expands a row
//! into consecutive `assistant/chunk` events:
//! `{"turn","step","chunk":{"type":"reasoning-delta"|"text-delta","index","text"}}` or
//! `{"turn","step","chunk":{"type":"tool-call-delta","index","id","name","argumentsDelta"}}`.

use serde::Serialize;
use serde_json::Value;

use crate::event::{to_raw, Event};

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
pub fn expand(kind: &str, data: &str, seq0: Option<u64>, time0: Option<i64>, position: u64) -> Result<Vec<Event>, String> {
    let data: Value = serde_json::from_str(data).map_err(|e| format!("{kind} row data is not JSON: {e}"))?;
    let items_key = if kind == "tool-call-chunks" { "args" } else { "texts" };
    let items = data.get(items_key).and_then(Value::as_array).ok_or_else(|| format!("{kind} row has no `{items_key}` array"))?;
    let dt = data.get("dt").and_then(Value::as_array).ok_or_else(|| format!("{kind} row has no `dt` array"))?;
    if !items.is_empty() && dt.len() + 1 != items.len() {
        return Err(format!("{kind} row has {} chunks but {} time gaps (expected {})", items.len(), dt.len(), items.len() - 1));
    }
    let seq0 = seq0.or_else(|| data.get("seq0").and_then(Value::as_u64)).unwrap_or(position);
    if seq0.checked_add(items.len().saturating_sub(1) as u64).is_none() {
        return Err(format!("{kind} row: its seqs from {seq0} run past the largest seq"));
    }
    let mut time = time0.or_else(|| data.get("time0").and_then(Value::as_i64)).unwrap_or(0);
    if !is_safe(time) {
        return Err(format!("{kind} row: time0 {time} is not a safe integer of ms"));
    }
    let null = Value::Null;
    let field = |k: &str| data.get(k).unwrap_or(&null);
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            let gap =
                dt[i - 1].as_i64().filter(|&gap| is_safe(gap)).ok_or_else(|| format!("{kind} row: dt[{}] is not a safe integer of ms", i - 1))?;
            // Both are safe integers, so the sum cannot overflow.
            time += gap;
            if !is_safe(time) {
                return Err(format!("{kind} row: the time of chunk {i}, {time}, is not a safe integer of ms"));
            }
        }
        let chunk = match kind {
            "tool-call-chunks" => {
                ChunkBody::ToolCall { kind: "tool-call-delta", index: field("index"), id: field("id"), name: field("name"), arguments_delta: item }
            }
            "reasoning-chunks" => ChunkBody::Text { kind: "reasoning-delta", index: field("index"), text: item },
            _ => ChunkBody::Text { kind: "text-delta", index: field("index"), text: item },
        };
        out.push(Event {
            // Checked above: no seq of the row overflows.
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

/// `(row type, turn, step, index, tool call (id, name), payload)`.
type PackKey = (&'static str, Value, Value, Value, Option<(Value, Option<Value>)>, Value);

/// The largest magnitude of a time or gap, ms: JavaScript's
/// `Number.MAX_SAFE_INTEGER`, the bound the harness checks rows against.
pub const MAX_SAFE: i64 = (1 << 53) - 1;

fn is_safe(n: i64) -> bool {
    (-MAX_SAFE..=MAX_SAFE).contains(&n)
}

/// The smallest run of chunk events stored as one row.
pub const MIN_RUN: usize = 3;

/// A chunk event's packing key: its row type, turn, step, block index and,
/// for tool-call deltas, the call id and name (`None` when the event must
/// be stored as it is). Only the exact shapes the harness packs qualify.
fn pack_key(event: &Event) -> Option<PackKey> {
    if event.kind != "assistant/chunk" || event.surface_op.is_some() || event.source_event_seqs.is_some() || !is_safe(event.time) {
        return None;
    }
    let Value::Object(data) = serde_json::from_str::<Value>(event.data.get()).ok()? else { return None };
    if data.len() != 3 || !data["turn"].is_number() || !data["step"].is_number() {
        return None;
    }
    let Value::Object(chunk) = data.get("chunk")? else { return None };
    if !chunk.get("index").is_some_and(Value::is_number) {
        return None;
    }
    let keys: Vec<&str> = chunk.keys().map(String::as_str).collect();
    let has = |want: &[&str]| keys.len() == want.len() && want.iter().all(|k| chunk.contains_key(*k));
    let (row, call, payload) = match chunk.get("type").and_then(Value::as_str)? {
        kind @ ("text-delta" | "reasoning-delta") if has(&["type", "index", "text"]) && chunk["text"].is_string() => {
            (if kind == "text-delta" { "text-chunks" } else { "reasoning-chunks" }, None, chunk["text"].clone())
        }
        "tool-call-delta"
            if (has(&["type", "index", "id", "argumentsDelta"])
                || (has(&["type", "index", "id", "name", "argumentsDelta"]) && chunk["name"].is_string()))
                && chunk["id"].is_string()
                && chunk["argumentsDelta"].is_string() =>
        {
            ("tool-call-chunks", Some((chunk["id"].clone(), chunk.get("name").cloned())), chunk["argumentsDelta"].clone())
        }
        _ => return None,
    };
    Some((row, data["turn"].clone(), data["step"].clone(), chunk["index"].clone(), call, payload))
}

/// The stored lines of a batch of events, each ending in a newline: with
/// `pack`, every run of [`MIN_RUN`] or more consecutive chunk events of one
/// block (contiguous seqs) becomes one packed row, as the harness writes
/// them; every other event is its own line. [`expand`] undoes it exactly.
pub fn storage_lines(events: &[Event], pack: bool) -> String {
    let mut out = String::new();
    let keys: Vec<_> = events.iter().map(|e| if pack { pack_key(e) } else { None }).collect();
    let mut i = 0;
    while i < events.len() {
        let Some(key) = &keys[i] else {
            out.push_str(&events[i].to_line());
            i += 1;
            continue;
        };
        let mut j = i + 1;
        while j < events.len()
            && events[j].seq == events[j - 1].seq + 1
            && events[j].time.checked_sub(events[j - 1].time).is_some_and(is_safe)
            && keys[j].as_ref().is_some_and(|k| (k.0, &k.1, &k.2, &k.3, &k.4) == (key.0, &key.1, &key.2, &key.3, &key.4))
        {
            j += 1;
        }
        if j - i < MIN_RUN {
            for e in &events[i..j] {
                out.push_str(&e.to_line());
            }
            i = j;
            continue;
        }
        let (row, turn, step, index, call, _) = key;
        let dt: Vec<i64> = events[i + 1..j].iter().zip(&events[i..j - 1]).map(|(b, a)| b.time - a.time).collect();
        let payloads: Vec<&Value> = keys[i..j].iter().filter_map(|k| k.as_ref().map(|k| &k.5)).collect();
        let mut data = serde_json::Map::new();
        data.insert("turn".into(), turn.clone());
        data.insert("step".into(), step.clone());
        data.insert("index".into(), index.clone());
        data.insert("dt".into(), serde_json::json!(dt));
        match call {
            Some((id, name)) => {
                data.insert("id".into(), id.clone());
                if let Some(name) = name {
                    data.insert("name".into(), name.clone());
                }
                data.insert("args".into(), serde_json::json!(payloads));
            }
            None => {
                data.insert("texts".into(), serde_json::json!(payloads));
            }
        }
        let line = serde_json::json!({"type": row, "seq0": events[i].seq, "time0": events[i].time, "data": data});
        out.push_str(&line.to_string());
        out.push('\n');
        i = j;
    }
    out
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

    #[test]
    fn runs_pack_and_expand_back_exactly() {
        let chunk = |seq: u64, time: i64, data: &str| Event {
            seq,
            time,
            kind: "assistant/chunk".into(),
            data: crate::json::RawJson::parse(data).unwrap(),
            surface_op: None,
            source_event_seqs: None,
        };
        let text = |seq, t, s: &str| chunk(seq, t, &format!(r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{s}"}}}}"#));
        let call = |seq, t, s: &str| {
            chunk(
                seq,
                t,
                &format!(
                    r#"{{"turn":1,"step":1,"chunk":{{"type":"tool-call-delta","index":1,"id":"c","name":"todo_write","argumentsDelta":"{s}"}}}}"#
                ),
            )
        };
        let events = vec![text(0, 10, "a"), text(1, 12, "b"), text(2, 12, "c"), call(3, 13, "{"), call(4, 14, "}")];
        let lines = storage_lines(&events, true);
        let rows: Vec<&str> = lines.lines().collect();
        assert_eq!(rows.len(), 3, "{lines}");
        assert!(
            rows[0].starts_with(r#"{"type":"text-chunks","seq0":0,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[2,0],"texts":["a","b","c"]}"#),
            "{}",
            rows[0]
        );
        let expanded = expand("text-chunks", &serde_json::from_str::<Value>(rows[0]).unwrap()["data"].to_string(), Some(0), Some(10), 0).unwrap();
        for (a, b) in expanded.iter().zip(&events) {
            assert_eq!((a.seq, a.time, a.data.get()), (b.seq, b.time, b.data.get()));
        }
        assert_eq!(storage_lines(&events, false).lines().count(), 5);
    }

    #[test]
    fn negative_gaps_and_times_expand_and_pack_as_the_harness_does() {
        let row = r#"{"turn":1,"step":1,"index":0,"dt":[-2378304174,28],"texts":["a","b","c"]}"#;
        let events = expand("text-chunks", row, Some(3), Some(1_700_000_000_100), 0).unwrap();
        assert_eq!(events.iter().map(|e| e.time).collect::<Vec<_>>(), [1_700_000_000_100, 1_697_621_695_926, 1_697_621_695_954]);
        let before = expand("text-chunks", r#"{"turn":1,"step":1,"index":0,"dt":[-3,0],"texts":["a","b","c"]}"#, None, Some(-2), 0).unwrap();
        assert_eq!(before.iter().map(|e| e.time).collect::<Vec<_>>(), [-2, -5, -5]);
        let in_data = expand("text-chunks", r#"{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b"],"time0":-7}"#, None, None, 0).unwrap();
        assert_eq!(in_data.iter().map(|e| e.time).collect::<Vec<_>>(), [-7, -6]);
        // Beyond JavaScript's safe integers, as the harness refuses them.
        let unsafe_gap = r#"{"turn":1,"step":1,"index":0,"dt":[9007199254740992],"texts":["a","b"]}"#;
        assert!(expand("text-chunks", unsafe_gap, None, Some(0), 0).unwrap_err().contains("dt[0]"));
        let past_the_end = r#"{"turn":1,"step":1,"index":0,"dt":[9007199254740991],"texts":["a","b"]}"#;
        assert!(expand("text-chunks", past_the_end, None, Some(1), 0).unwrap_err().contains("chunk 1"));
        assert!(expand("text-chunks", past_the_end, None, Some(i64::MIN), 0).unwrap_err().contains("time0"));
        assert!(expand("text-chunks", row, Some(u64::MAX - 1), Some(0), 0).unwrap_err().contains("largest seq"));
        // A run whose clock stepped back packs into one row with a negative
        // gap, and expands back exactly.
        let lines = storage_lines(&events, true);
        assert_eq!(lines.lines().count(), 1, "{lines}");
        let stored: Value = serde_json::from_str(lines.trim_end()).unwrap();
        assert_eq!(stored["data"]["dt"], serde_json::json!([-2_378_304_174_i64, 28]));
        let back = expand("text-chunks", &stored["data"].to_string(), stored["seq0"].as_u64(), stored["time0"].as_i64(), 0).unwrap();
        for (a, b) in back.iter().zip(&events) {
            assert_eq!((a.seq, a.time, a.data.get()), (b.seq, b.time, b.data.get()));
        }
        // Times whose gap is not a safe integer are stored one per line.
        let mut far = events.clone();
        far[1].time = -crate::packed::MAX_SAFE;
        far[2].time = i64::MAX;
        assert_eq!(storage_lines(&far, true).lines().count(), 3);
    }
}
