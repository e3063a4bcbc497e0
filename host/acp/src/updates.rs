//! The session log read as ACP `session/update`s.
//!
//! The same reading serves a running prompt (each event as it is appended)
//! and `session/load` (every stored event, in order), so what an editor
//! shows is what the session holds:
//!
//! | event | update |
//! | --- | --- |
//! | `user/message` from the user (loading only) | `user_message_chunk` per text part |
//! | `assistant/chunk` `text-delta` / `reasoning-delta` | `agent_message_chunk` / `agent_thought_chunk` |
//! | `assistant/message` | its text and reasoning as chunks, when the step did not stream them |
//! | `tool/call` | `tool_call` (`in_progress`, title, kind, raw input) |
//! | `tool/result` | `tool_call_update` (`completed` or `failed`, the text, the structured value as raw output) |
//! | `todo/write` | `plan`: every item, content verbatim, status as written, priority `medium` |
//! | `turn/start` after a plan was shown | `plan` with no entries |
//!
//! `todo_write` items carry no priority; ACP requires one, so every entry
//! says `medium`. A refused `todo_write` appends no `todo/write` event and
//! so sends no plan; an emptied list sends `entries: []`, and so does the
//! `turn/start` of a new turn after a plan was shown (a new turn starts
//! without one, as the todo projection folds it).

use serde_json::{json, Value};

use cordis_session::Event;

/// The event type whose data is a whole todo list (`{"todos": [...]}`).
pub const TODO_WRITE: &str = "todo/write";

/// How a tool is shown: its title and its ACP kind.
pub trait ToolLook {
    /// The title of a call of `name` with `arguments` (raw text).
    fn title(&self, name: &str, arguments: &str) -> String;
}

/// Reads events into updates, keeping what a step has streamed.
#[derive(Debug, Default)]
pub struct UpdateStream {
    /// Whether the user's own messages are sent (loading a session; a
    /// running prompt's user message is the client's own).
    replay_user: bool,
    text_streamed: bool,
    reasoning_streamed: bool,
    /// A plan with entries was sent and not cleared since.
    plan_shown: bool,
}

impl UpdateStream {
    /// For a running prompt.
    pub fn live() -> UpdateStream {
        UpdateStream::default()
    }

    /// Whether a plan with entries is shown (sent and not cleared since).
    pub fn plan_shown(&self) -> bool {
        self.plan_shown
    }

    /// Goes on from a stream of the same session that left a plan shown
    /// (`shown`): the next turn's start clears it.
    pub fn with_plan_shown(mut self, shown: bool) -> UpdateStream {
        self.plan_shown = shown;
        self
    }

    /// For `session/load`: the user's messages are sent too.
    pub fn replay() -> UpdateStream {
        UpdateStream { replay_user: true, ..UpdateStream::default() }
    }

    /// The updates `event` makes (each the `update` member of a
    /// `session/update` notification), in order.
    pub fn updates(&mut self, event: &Event, look: &dyn ToolLook) -> Vec<Value> {
        if event.kind == "turn/start" {
            // A new turn starts without a plan (the todo projection
            // clears it): the editor's plan is cleared with it.
            return if std::mem::take(&mut self.plan_shown) { vec![plan(&[])] } else { Vec::new() };
        }
        // Only the events that make updates are parsed.
        if !matches!(
            event.kind.as_str(),
            "step/start" | "user/message" | "assistant/chunk" | "assistant/message" | "tool/call" | "tool/result" | TODO_WRITE
        ) {
            return Vec::new();
        }
        let data = if event.kind == "step/start" { Value::Null } else { event.data_value() };
        match event.kind.as_str() {
            "step/start" => {
                self.text_streamed = false;
                self.reasoning_streamed = false;
                Vec::new()
            }
            "user/message" if self.replay_user && data["source"]["kind"] == "user" => text_parts(&data["content"], "text")
                .into_iter()
                .map(|text| json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}))
                .collect(),
            "assistant/chunk" => {
                let chunk = &data["chunk"];
                let text = chunk["text"].as_str().unwrap_or_default();
                match chunk["type"].as_str() {
                    Some("text-delta") if !text.is_empty() => {
                        self.text_streamed = true;
                        vec![message_chunk("agent_message_chunk", text)]
                    }
                    Some("reasoning-delta") if !text.is_empty() => {
                        self.reasoning_streamed = true;
                        vec![message_chunk("agent_thought_chunk", text)]
                    }
                    _ => Vec::new(),
                }
            }
            "assistant/message" => {
                let mut out = Vec::new();
                let content = &data["message"]["content"];
                if !self.reasoning_streamed {
                    out.extend(text_parts(content, "reasoning").into_iter().map(|t| message_chunk("agent_thought_chunk", &t)));
                }
                if !self.text_streamed {
                    out.extend(text_parts(content, "text").into_iter().map(|t| message_chunk("agent_message_chunk", &t)));
                }
                out
            }
            "tool/call" => {
                let id = data["callId"].as_str().unwrap_or_default();
                let name = data["name"].as_str().unwrap_or_default();
                let arguments = data["arguments"].as_str().unwrap_or_default();
                vec![tool_call(id, name, arguments, look)]
            }
            "tool/result" => {
                let part = &data["message"]["content"][0];
                let Some(id) = part["toolCallId"].as_str().or_else(|| data["message"]["source"]["callId"].as_str()) else {
                    return Vec::new();
                };
                let failed = part["isError"].as_bool().unwrap_or(false) || !part["error"].is_null();
                let texts = text_parts(&part["content"], "text");
                let mut update = json!({
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": id,
                    "status": if failed { "failed" } else { "completed" },
                    "content": texts.iter().map(|t| json!({"type": "content", "content": {"type": "text", "text": t}})).collect::<Vec<_>>(),
                });
                if let Some(value) = part.get("structuredContent") {
                    update["rawOutput"] = value.clone();
                }
                vec![update]
            }
            TODO_WRITE => match data["todos"].as_array() {
                Some(todos) => {
                    self.plan_shown = !todos.is_empty();
                    vec![plan(todos)]
                }
                None => Vec::new(),
            },
            _ => Vec::new(),
        }
    }
}

/// The `tool_call` update announcing call `id` of `name`.
pub fn tool_call(id: &str, name: &str, arguments: &str, look: &dyn ToolLook) -> Value {
    let raw_input = serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()));
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": look.title(name, arguments),
        "kind": kind(name),
        "status": "in_progress",
        "rawInput": raw_input,
    })
}

/// The `plan` update for a whole todo list.
pub fn plan(todos: &[Value]) -> Value {
    let entries: Vec<Value> = todos
        .iter()
        .map(|t| {
            json!({
                "content": t["content"].as_str().unwrap_or_default(),
                "priority": "medium",
                "status": t["status"].as_str().unwrap_or("pending"),
            })
        })
        .collect();
    json!({"sessionUpdate": "plan", "entries": entries})
}

/// ACP's kind for a tool, from the words of its name: `think` for the
/// plan, then by the words tools are usually named with; `other` when
/// none fits.
pub fn kind(name: &str) -> &'static str {
    let n = name.to_ascii_lowercase();
    // Whole words of the name (`mcp__fs__read_file` → mcp, fs, read, file).
    let words: Vec<&str> = n.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let has = |wanted: &[&str]| words.iter().any(|w| wanted.contains(w));
    if n == "todo_write" || has(&["think", "plan", "todo"]) {
        "think"
    } else if has(&["delete", "remove", "unlink"]) {
        "delete"
    } else if has(&["move", "rename"]) {
        "move"
    } else if has(&["write", "edit", "patch", "replace", "create"]) {
        "edit"
    } else if has(&["search", "grep", "find", "glob"]) {
        "search"
    } else if has(&["read", "view", "cat", "list", "ls"]) {
        "read"
    } else if has(&["bash", "shell", "exec", "run", "terminal", "command"]) {
        "execute"
    } else if has(&["fetch", "http", "web", "url", "download"]) {
        "fetch"
    } else {
        "other"
    }
}

fn message_chunk(update: &str, text: &str) -> Value {
    json!({"sessionUpdate": update, "content": {"type": "text", "text": text}})
}

/// The non-empty `text` of each part of `content` whose `type` is `kind`.
fn text_parts(content: &Value, kind: &str) -> Vec<String> {
    match content {
        Value::String(s) if kind == "text" && !s.is_empty() => vec![s.clone()],
        Value::Array(parts) => {
            parts.iter().filter(|p| p["type"] == kind).filter_map(|p| p["text"].as_str()).filter(|t| !t.is_empty()).map(str::to_string).collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Names;
    impl ToolLook for Names {
        fn title(&self, name: &str, _: &str) -> String {
            name.to_string()
        }
    }

    fn event(kind: &str, data: Value) -> Event {
        Event { seq: 1, time: 0, kind: kind.into(), data: cordis_session::json::RawJson::encode(&data), surface_op: None, source_event_seqs: None }
    }

    #[test]
    fn a_todo_write_is_the_whole_plan_and_an_empty_list_clears_it() {
        let mut s = UpdateStream::live();
        let todos = json!({"todos": [
            {"content": "read the code", "status": "completed"},
            {"content": "build", "status": "in_progress"},
            {"content": "test", "status": "in_progress"},
            {"content": "  ship it  ", "status": "pending"}
        ]});
        let u = s.updates(&event(TODO_WRITE, todos), &Names);
        assert_eq!(
            u,
            vec![json!({"sessionUpdate": "plan", "entries": [
                {"content": "read the code", "priority": "medium", "status": "completed"},
                {"content": "build", "priority": "medium", "status": "in_progress"},
                {"content": "test", "priority": "medium", "status": "in_progress"},
                {"content": "  ship it  ", "priority": "medium", "status": "pending"}
            ]})]
        );
        assert_eq!(s.updates(&event(TODO_WRITE, json!({"todos": []})), &Names), vec![json!({"sessionUpdate": "plan", "entries": []})]);
        assert!(s.updates(&event("turn/start", json!({"turn": 2})), &Names).is_empty(), "nothing shown, nothing to clear");
        s.updates(&event(TODO_WRITE, json!({"todos": [{"content": "a", "status": "pending"}]})), &Names);
        assert_eq!(s.updates(&event("turn/start", json!({"turn": 3})), &Names), vec![json!({"sessionUpdate": "plan", "entries": []})]);
    }

    #[test]
    fn streamed_text_is_not_sent_twice() {
        let mut s = UpdateStream::live();
        s.updates(&event("step/start", json!({"turn": 1, "step": 1})), &Names);
        let chunk = s.updates(&event("assistant/chunk", json!({"chunk": {"type": "text-delta", "text": "Hel"}})), &Names);
        assert_eq!(chunk, vec![json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}})]);
        let message = json!({"message": {"content": [{"type": "reasoning", "text": "hm"}, {"type": "text", "text": "Hello"}]}});
        let u = s.updates(&event("assistant/message", message.clone()), &Names);
        assert_eq!(u, vec![json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}})]);
        s.updates(&event("step/start", json!({"turn": 1, "step": 2})), &Names);
        assert_eq!(s.updates(&event("assistant/message", message), &Names).len(), 2);
    }

    #[test]
    fn calls_and_results_keep_their_ids() {
        let mut s = UpdateStream::live();
        let call = s.updates(&event("tool/call", json!({"callId": "c1", "name": "todo_write", "arguments": "{\"todos\":[]}"})), &Names);
        assert_eq!(call[0]["toolCallId"], "c1");
        assert_eq!(call[0]["kind"], "think");
        assert_eq!(call[0]["rawInput"], json!({"todos": []}));
        let result = json!({"message": {"source": {"kind": "tool", "callId": "c1"}, "content": [
            {"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": "refused"}], "isError": true}
        ]}});
        let u = s.updates(&event("tool/result", result), &Names);
        assert_eq!(u[0]["status"], "failed");
        assert_eq!(u[0]["content"][0]["content"]["text"], "refused");
    }

    #[test]
    fn user_messages_only_when_loading() {
        let data = json!({"content": [{"type": "text", "text": "fix it"}], "source": {"kind": "user"}});
        assert!(UpdateStream::live().updates(&event("user/message", data.clone()), &Names).is_empty());
        assert_eq!(UpdateStream::replay().updates(&event("user/message", data), &Names)[0]["sessionUpdate"], "user_message_chunk");
    }

    #[test]
    fn kinds_follow_names() {
        assert_eq!(kind("read_file"), "read");
        assert_eq!(kind("bash"), "execute");
        assert_eq!(kind("grep"), "search");
        assert_eq!(kind("frobnicate"), "other");
        assert_eq!(kind("mcp__fs__write_file"), "edit");
        assert_eq!(kind("mcp__web__todo_write"), "think");
    }
}
