//! The `todos` projection: the current plan of a session, folded from its
//! log (the log, not plugin memory, is the single source of truth).
//!
//! - `null` before any write;
//! - `todo/write` sets the list (whole-list replace: the last write wins);
//! - `turn/start` clears it to `null` (a new turn starts without the previous
//!   turn's plan strip);
//! - every other event keeps it; in particular `turn/end` keeps the finished
//!   list, and is not even among the folded [`types`](TodosProjection).

use cordis_abi::sdk::Fold;

use crate::item::{Todo, TodoWrite};
use crate::tool::TODO_WRITE;
use crate::view::{plan_summary, render_plan};

/// The projection's key.
pub const PROJECTION_KEY: &str = "todos";

/// The projection's version; bump it when the fold changes so hosts rebuild
/// stored states from the log.
pub const PROJECTION_VERSION: u32 = 1;

/// The core event type that clears the plan.
pub const TURN_START: &str = "turn/start";

/// The state: `None` (serialized `null`) when there is no current plan,
/// otherwise the list of the last `todo/write`.
pub type TodosState = Option<Vec<Todo>>;

/// Folds one event into the state (see the [module docs](self)).
///
/// # Errors
/// When a `todo/write` event's data is not a readable `{"todos": [...]}`; the
/// host then keeps the previous state.
pub fn fold(state: TodosState, event_type: &str, data: &str) -> Result<TodosState, String> {
    match event_type {
        TODO_WRITE => {
            let write: TodoWrite = serde_json::from_str(data).map_err(|e| format!("unreadable todo/write data: {e}"))?;
            Ok(Some(write.todos))
        }
        TURN_START => Ok(None),
        _ => Ok(state),
    }
}

/// The `todos` projection, registered by the plugin's `apply`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TodosProjection;

impl Fold for TodosProjection {
    type State = TodosState;

    fn key(&self) -> &str {
        PROJECTION_KEY
    }

    fn version(&self) -> u32 {
        PROJECTION_VERSION
    }

    fn types(&self) -> Vec<String> {
        vec![TODO_WRITE.to_string(), TURN_START.to_string()]
    }

    fn init(&self) -> TodosState {
        None
    }

    fn apply(&self, state: TodosState, event_type: &str, data: &str) -> Result<TodosState, String> {
        fold(state, event_type, data)
    }

    /// Both folded types replace the plan: `todo/write` with its list,
    /// `turn/start` with `null`. The previous plan is never read.
    fn replaces(&self, event_type: &str) -> bool {
        matches!(event_type, TODO_WRITE | TURN_START)
    }

    /// Empty for `null`; otherwise [`render_plan`].
    fn render(&self, state: &TodosState) -> String {
        state.as_deref().map(render_plan).unwrap_or_default()
    }

    /// Empty for `null`; otherwise [`plan_summary`] joined into one line.
    fn summary(&self, state: &TodosState) -> String {
        state.as_deref().map(|todos| plan_summary(todos).to_string()).unwrap_or_default()
    }

    /// After a compaction the model gets [`plan_after_compaction`]: the
    /// standing plan verbatim. Nothing for `null` or an empty list, so a
    /// plan that a new turn or an empty write cleared stays cleared.
    fn compaction_context(&self, state: &TodosState) -> Option<Vec<serde_json::Value>> {
        let todos = state.as_deref().filter(|t| !t.is_empty())?;
        Some(vec![serde_json::json!({"type": "text", "text": plan_after_compaction(todos)?})])
    }
}

/// The message that carries a standing plan across a compaction: one line
/// saying what it is, then the list exactly as the last `todo/write`
/// recorded it (`{"todos": [...]}`, the same JSON), so every item keeps its
/// content and status, `in_progress` ones included. `None` only when the
/// list cannot be encoded.
pub fn plan_after_compaction(todos: &[Todo]) -> Option<String> {
    let json = serde_json::to_string(&TodoWrite { todos: todos.to_vec() }).ok()?;
    Some(format!(
        "Earlier messages were condensed into the summary above. Your plan stands as you last wrote it with todo_write (update it with todo_write as you go):\n{json}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::Status;

    const WRITE_A: &str = r#"{"todos":[{"content":"a","status":"in_progress"},{"content":"b","status":"pending"}]}"#;
    const WRITE_B: &str = r#"{"todos":[{"content":"a","status":"completed"}]}"#;

    fn run(events: &[(&str, &str)]) -> TodosState {
        let p = TodosProjection;
        let mut state = p.init();
        for (t, d) in events {
            if p.types().iter().any(|x| x == t) {
                state = p.apply(state, t, d).unwrap();
            }
        }
        state
    }

    #[test]
    fn replacing_types_ignore_the_state() {
        let p = TodosProjection;
        let before = Some(vec![Todo::new("old", Status::Pending)]);
        for t in p.types() {
            assert!(p.replaces(&t), "{t}");
            let data = if t == TODO_WRITE { WRITE_B } else { "{}" };
            assert_eq!(p.apply(before.clone(), &t, data).unwrap(), p.apply(p.init(), &t, data).unwrap(), "{t}");
        }
        assert!(!p.replaces("turn/end"));
    }

    #[test]
    fn null_before_any_write() {
        assert_eq!(run(&[]), None);
        assert_eq!(serde_json::to_string(&TodosProjection.init()).unwrap(), "null");
        assert_eq!(run(&[("turn/start", "{}"), ("user/message", "{}")]), None);
    }

    #[test]
    fn write_sets_and_last_write_wins() {
        let state = run(&[("turn/start", "{}"), ("todo/write", WRITE_A)]);
        assert_eq!(state, Some(vec![Todo::new("a", Status::InProgress), Todo::new("b", Status::Pending)]));
        let state = run(&[("turn/start", "{}"), ("todo/write", WRITE_A), ("todo/write", WRITE_B)]);
        assert_eq!(state, Some(vec![Todo::new("a", Status::Completed)]));
        assert_eq!(serde_json::to_string(&state).unwrap(), r#"[{"content":"a","status":"completed"}]"#);
    }

    #[test]
    fn other_types_keep_and_turn_start_clears() {
        let p = TodosProjection;
        let state = fold(None, "todo/write", WRITE_A).unwrap();
        for t in ["turn/end", "tool/result", "step/end", "assistant/message", "x/unknown"] {
            assert_eq!(p.apply(state.clone(), t, "{}").unwrap(), state, "{t}");
        }
        assert_eq!(p.apply(state, "turn/start", r#"{"turn":2}"#).unwrap(), None);
        assert!(!p.types().contains(&"turn/end".to_string()));
        assert_eq!(p.types(), vec!["todo/write".to_string(), "turn/start".to_string()]);
        assert_eq!(p.version(), 1);
        assert_eq!(p.key(), "todos");
    }

    #[test]
    fn unreadable_write_is_an_error() {
        assert!(fold(None, "todo/write", "{").is_err());
        assert!(fold(None, "todo/write", r#"{"todos":[{"content":"a","status":"done"}]}"#).is_err());
    }

    #[test]
    fn render_and_summary() {
        let p = TodosProjection;
        assert_eq!(p.render(&None), "");
        assert_eq!(p.summary(&None), "");
        let state = fold(None, "todo/write", WRITE_A).unwrap();
        assert_eq!(p.render(&state), "1 in progress · 1 pending\n● a\n○ b");
        assert_eq!(p.summary(&state), "0/2 completed · a");
        assert_eq!(p.render(&Some(Vec::new())), "no todos");
    }
}
