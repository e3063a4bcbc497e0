//! `todo-read`: the todo family's reader.
//!
//! A `todo_read` tool, taking no arguments, that answers with the current
//! plan of the session that calls it, as tool-todo's `todos` projection
//! holds it: a line per todo (`[status] content`) for the model, and
//! `{"todos": [{"content", "status"}, ...]}` (an empty list when there is
//! no current plan) as the structured value.
//!
//! It needs no session id from the model: it reads the calling session
//! through the host capability `session.read` (cordis-abi 1.4), which it
//! requires, so a host older than 1.4 refuses it before it runs, naming the
//! capability. It reads the projection by its key only and never links
//! tool-todo. It injects tool-todo's `todos` service, so without a
//! provider of the plan it waits (and `cordis check` says for what) rather
//! than loading a tool whose every call fails.

use cordis_abi::capabilities::SESSION_READ;
use cordis_abi::prelude::*;
use serde_json::json;

/// The plugin's name.
pub const PLUGIN_NAME: &str = "todo-read";

/// The tool's name.
pub const TODO_READ: &str = "todo_read";

/// The key of the projection it reads.
pub const PLAN_KEY: &str = "todos";

/// The config: an empty object (`config: {}` or no `config` at all).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {}

/// The arguments: none (an empty object).
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {}

/// One todo as the `todos` projection holds it (its other fields ignored).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct PlanItem {
    /// What the todo says.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// The model-facing text for a plan: `[status] content` per line, or a
/// sentence saying there is no plan.
pub fn describe(plan: &[PlanItem]) -> String {
    if plan.is_empty() {
        return "There is no current plan (none was written in this turn, or the last write cleared it).".into();
    }
    plan.iter().map(|t| format!("[{}] {}", t.status, t.content.replace('\n', " "))).collect::<Vec<_>>().join("\n")
}

/// Reads the calling session's plan from a `session.read` answer.
///
/// # Errors
/// When no session calls, no `todos` projection is registered, or its state
/// is not a list of todos.
pub fn plan_of(session: &CallingSession) -> Result<Vec<PlanItem>, ToolError> {
    if session.id.is_none() {
        return Err(ToolError::new("todo_read reads the plan of the session that calls it, and no agent session owns this call"));
    }
    match session.projections.get(PLAN_KEY) {
        Some(Value::Null) => Ok(Vec::new()),
        Some(state) => {
            serde_json::from_value(state.clone()).map_err(|e| ToolError::new(format!("the `todos` projection holds no list of todos: {e}")))
        }
        None => Err(ToolError::new("no `todos` projection is registered: add tool-todo to the composition")),
    }
}

struct ReadTool;

impl TypedTool for ReadTool {
    type Args = ReadArgs;

    fn name(&self) -> &str {
        TODO_READ
    }

    fn description(&self) -> String {
        "Read your current todo list (the plan you last wrote with todo_write in this turn). Takes no arguments.".into()
    }

    fn execute(&self, _args: ReadArgs, cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {
        // Required by the plugin, so a host that runs it offers it.
        let session = cx.session(&[PLAN_KEY])?.ok_or_else(|| ToolError::new("this host does not offer session.read (cordis-abi 1.4)"))?;
        let plan = plan_of(&session)?;
        Ok(ToolReply { text: describe(&plan), value: Some(json!({ "todos": plan })) })
    }
}

/// The `todo-read` plugin.
pub struct ReadPlugin;

impl Plugin for ReadPlugin {
    const NAME: &'static str = PLUGIN_NAME;
    const INJECT: &'static [&'static str] = &["tools", "todos"];
    const REQUIRES: &'static [Capability] = &[SESSION_READ];
    type Config = Config;

    fn apply(ctx: &Context<'_>, _config: Config) -> Result<(), PluginError> {
        ctx.tools()?.register(ReadTool)
    }
}

cordis_abi::export_plugin!(ReadPlugin);
cordis_abi::export_library!();

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn session(id: Option<&str>, state: Option<Value>) -> CallingSession {
        CallingSession { id: id.map(str::to_string), projections: state.map(|s| (PLAN_KEY.to_string(), s)).into_iter().collect::<BTreeMap<_, _>>() }
    }

    #[test]
    fn the_plan_is_read_from_the_projection() {
        let plan = plan_of(&session(Some("s-1"), Some(json!([{"content": "a\nb", "status": "pending", "activeForm": "x"}])))).unwrap();
        assert_eq!(plan, [PlanItem { content: "a\nb".into(), status: "pending".into() }]);
        assert_eq!(describe(&plan), "[pending] a b");
        assert!(plan_of(&session(Some("s-1"), Some(Value::Null))).unwrap().is_empty());
        assert!(describe(&[]).starts_with("There is no current plan"));
    }

    #[test]
    fn no_session_and_no_projection_are_told_apart() {
        assert!(plan_of(&session(None, None)).unwrap_err().0.contains("no agent session owns this call"));
        assert!(plan_of(&session(Some("s-1"), None)).unwrap_err().0.contains("add tool-todo"));
        assert!(plan_of(&session(Some("s-1"), Some(json!({"x": 1})))).unwrap_err().0.contains("no list of todos"));
    }
}
