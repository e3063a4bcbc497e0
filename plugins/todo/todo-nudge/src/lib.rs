//! `todo-nudge`: the second plugin of the todo family.
//!
//! Agents often end a turn with work still on their plan. This plugin
//! injects tool-todo's `todos` service and the agent loop's turn-end hook
//! (`agent`): when the model ends a turn while the session's plan still has
//! `pending` or `in_progress` todos, it appends a `todo/nudge` event, a
//! short reminder listing them, and lets the model take another step. It
//! does so at most `maxNudges` times per turn.
//!
//! `todo/nudge` is a surface event: the model sees the reminder as a
//! user-side message, and transcripts show it. Its data:
//! `{"role": "user", "turn": N, "nudge": K, "open": [TEXT, ...], "text":
//! TEXT}` (`nudge` counts from 1 within the turn; `open` lists the
//! unfinished todos as `[status] content`).

use std::collections::HashMap;
use std::sync::Mutex;

use cordis_abi::prelude::*;
use serde_json::{json, Value};

/// The plugin's name.
pub const PLUGIN_NAME: &str = "todo-nudge";

/// The event type it owns.
pub const TODO_NUDGE: &str = "todo/nudge";

/// The config: `{"maxNudges": N}`, required.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// How many reminders one turn may get (0 switches the reminders off;
    /// at most 64, the steps a turn may take).
    #[schemars(range(min = 0, max = 64))]
    pub max_nudges: u32,
}

/// The data of a `todo/nudge` event.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Nudge {
    /// Always `"user"`: the reminder is a user-side message.
    pub role: String,
    /// The turn it belongs to.
    pub turn: u64,
    /// Which reminder of the turn it is, from 1.
    pub nudge: u32,
    /// The unfinished todos, as `[status] content`.
    pub open: Vec<String>,
    /// The reminder the model reads.
    pub text: String,
}

/// Checks `todo/nudge` data on append and on replay.
pub fn check_nudge(data: &str) -> Result<(), String> {
    let nudge: Nudge = serde_json::from_str(data).map_err(|e| format!("not a todo/nudge: {e}"))?;
    if nudge.role != "user" {
        return Err(format!("`role` must be \"user\", found {:?}", nudge.role));
    }
    if nudge.nudge == 0 {
        return Err("`nudge` counts from 1".into());
    }
    if nudge.text.trim().is_empty() || nudge.open.is_empty() {
        return Err("a reminder needs its text and the open todos".into());
    }
    Ok(())
}

/// The reminder for a plan's unfinished todos (`[status] content` each).
pub fn reminder(open: &[String]) -> String {
    let mut text = String::from("Your plan still has unfinished todos:\n");
    for item in open {
        text.push_str("- ");
        text.push_str(item);
        text.push('\n');
    }
    text.push_str("Carry on with them now, or, if some are no longer needed, say so and update the plan with todo_write.");
    text
}

/// The unfinished todos of a `todos.get` answer, as `[status] content`.
pub fn unfinished(plan: &Value) -> Vec<String> {
    plan["todos"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let status = t["status"].as_str()?;
            matches!(status, "pending" | "in_progress").then(|| format!("[{status}] {}", t["content"].as_str().unwrap_or_default()))
        })
        .collect()
}

struct Nudger {
    todos: ServiceHandle,
    max: u32,
    /// Reminders given per (session, turn).
    given: Mutex<HashMap<(String, u64), u32>>,
}

impl TurnEnd for Nudger {
    fn turn_end(&self, turn: &TurnInfo, cx: &ToolContext<'_>) -> Result<bool, String> {
        if self.max == 0 {
            return Ok(false);
        }
        let key = (turn.session.clone(), turn.turn);
        let given = self.given.lock().map_err(|_| "the nudge counter is poisoned".to_string())?.get(&key).copied().unwrap_or(0);
        if given >= self.max {
            return Ok(false);
        }
        let plan = self.todos.call("get", &json!({"session": turn.session})).map_err(|e| e.0)?;
        let open = unfinished(&plan);
        if open.is_empty() {
            return Ok(false);
        }
        let nudge = Nudge { role: "user".into(), turn: turn.turn, nudge: given + 1, text: reminder(&open), open };
        cx.append(TODO_NUDGE, &nudge).map_err(|e| e.0)?;
        let mut counts = self.given.lock().map_err(|_| "the nudge counter is poisoned".to_string())?;
        counts.retain(|(session, _), _| *session != key.0);
        counts.insert(key, given + 1);
        Ok(true)
    }
}

/// The `todo-nudge` plugin.
pub struct NudgePlugin;

impl Plugin for NudgePlugin {
    const NAME: &'static str = PLUGIN_NAME;
    const INJECT: &'static [&'static str] = &["todos", "agent"];
    type Config = Config;

    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        ctx.own_surface_event_type(TODO_NUDGE, check_nudge)?;
        let todos = ctx.service("todos")?;
        ctx.on_turn_end(Nudger { todos, max: config.max_nudges, given: Mutex::new(HashMap::new()) })
    }
}

cordis_abi::export_plugin!(NudgePlugin);
cordis_abi::export_library!();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfinished_todos_are_listed_with_their_status() {
        let plan = json!({"todos": [
            {"content": "read", "status": "completed"},
            {"content": "fix", "status": "in_progress"},
            {"content": "test", "status": "pending"}
        ]});
        assert_eq!(unfinished(&plan), ["[in_progress] fix", "[pending] test"]);
        assert!(unfinished(&json!({"todos": null})).is_empty());
        let text = reminder(&unfinished(&plan));
        assert!(text.contains("- [pending] test\n"), "{text}");
    }

    #[test]
    fn the_invariant_checks_role_count_and_content() {
        let good = json!({"role": "user", "turn": 1, "nudge": 1, "open": ["[pending] x"], "text": "t"}).to_string();
        assert!(check_nudge(&good).is_ok());
        let bad_role = good.replace("\"user\"", "\"assistant\"");
        assert!(check_nudge(&bad_role).unwrap_err().contains("role"));
        let zero = json!({"role": "user", "turn": 1, "nudge": 0, "open": ["x"], "text": "t"}).to_string();
        assert!(check_nudge(&zero).is_err());
        assert!(check_nudge("{\"role\": \"user\"}").is_err());
    }
}
