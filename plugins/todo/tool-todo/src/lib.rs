//! The todo family for cordis: the model-facing `todo_write` tool, the
//! `todo/write` session event type it owns, and the `todos` projection with
//! its plan view.
//!
//! The model keeps a structured task list by sending the **whole** list on
//! every call; the list is stored as a `todo/write` event on the calling
//! agent's session log, so it is durable and replayable like the rest of the
//! conversation, and the current plan is a fold of that log. How many todos
//! may be `in_progress` at once is a required deployment choice,
//! `allowParallelInProgress`; the durable-log invariant does not follow
//! it, so a log written under either policy replays under both.
//!
//! Modules, one per concept:
//! - [`item`]: [`Todo`], [`Status`], [`Counts`], the event data [`TodoWrite`];
//! - [`trim`]: [`js_trim`], trimming exactly like JavaScript's `String.prototype.trim`;
//! - [`tool`]: the `todo_write` tool, its [`Policy`], limits and [`validate_call`];
//! - [`invariant`]: the durable-log invariant of `todo/write`;
//! - [`projection`]: the `todos` fold;
//! - [`service`]: the `todos` service other plugins inject;
//! - [`view`]: the plan rendering and [`plan_summary`].
//!
//! The crate builds both a `cdylib` (the plugin library the host loads,
//! exporting the plugin `tool-todo`) and an `rlib`, so tests and benchmarks
//! can call the same validation in-process without the ABI.

pub mod invariant;
pub mod item;
pub mod projection;
pub mod service;
pub mod tool;
pub mod trim;
pub mod view;

use cordis_abi::prelude::*;

pub use invariant::{check_todo_write, TodoWriteInvariant};
pub use item::{Counts, Status, Todo, TodoRef, TodoWrite};
pub use projection::{TodosProjection, TodosState};
pub use tool::{
    encoded_reply, execute_call, execute_call_encoded, execute_call_parsed, validate_borrowed, validate_call, Policy, TodoArgs, TodoArgsRef,
    TodoSink, TodoWriteTool, TodoWriteValue, TODO_WRITE, TOOL_NAME,
};
pub use trim::js_trim;
pub use view::{plan_summary, render_plan, PlanSummary};

/// The plugin's name, as a composition entry names it.
pub const PLUGIN_NAME: &str = "tool-todo";

/// The package name the TypeScript harness publishes this tool under; a
/// composition written for the harness names it, and resolves to this plugin.
pub const PACKAGE_NAME: &str = "@deepseek-ai/dsh-tool-todo";

/// The config of a `tool-todo` entry: `{"allowParallelInProgress": true|false}`.
///
/// The field is required and has no default, and unknown keys are errors: a
/// deployment states its policy deliberately, and a misspelled key must not
/// fall back silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(transform = item::drop_description)]
pub struct Config {
    /// Whether several todos may be `in_progress` at the same time. Choose `true` for agents that run work in parallel (subagents, background commands): `todo_write` then accepts any number of active todos and tells the model to mark each one it is working on. Choose `false` for strictly sequential agents: the tool then asks for one active todo at a time and rejects a list marking more. Stored lists replay under either setting, so the policy may change between runs.
    pub allow_parallel_in_progress: bool,
}

impl Config {
    /// The policy this config selects.
    pub fn policy(&self) -> Policy {
        Policy::from_allow_parallel(self.allow_parallel_in_progress)
    }
}

/// The `tool-todo` plugin: injects `tools` and `projections`; `apply` owns
/// `todo/write` with [`TodoWriteInvariant`], registers the
/// [`TodosProjection`], registers [`TodoWriteTool`] under the config's
/// [`Policy`], and provides the `todos` service ([`service`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct TodoPlugin;

impl Plugin for TodoPlugin {
    const NAME: &'static str = PLUGIN_NAME;
    const INJECT: &'static [&'static str] = &["tools", "projections"];
    const PACKAGES: &'static [&'static str] = &[PACKAGE_NAME];
    const PROVIDES: &'static [&'static str] = &[service::SERVICE_NAME];
    type Config = Config;

    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        ctx.own_event_type(TODO_WRITE, TodoWriteInvariant)?;
        ctx.register_projection(TodosProjection)?;
        ctx.tools()?.register(TodoWriteTool::new(config.policy()))?;
        ctx.provide(service::SERVICE_NAME, service::TodosService { projections: ctx.service("projections")? })
    }
}

cordis_abi::export_plugin!(TodoPlugin);
cordis_abi::export_library!();

/// The JSON Schema of [`Config`], as the host validates an entry's `config`
/// against it.
pub fn config_schema() -> Value {
    cordis_abi::schema::schema_for::<Config>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cordis_abi::schema::Checker;
    use serde_json::json;

    #[test]
    fn config_schema_requires_the_policy_and_rejects_unknown_keys() {
        let schema = config_schema();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["allowParallelInProgress"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["allowParallelInProgress"]["type"], "boolean");
        assert!(schema["properties"]["allowParallelInProgress"]["description"].as_str().unwrap().contains("in_progress"));
        assert!(schema["properties"]["allowParallelInProgress"].get("default").is_none());

        let checker = Checker::new(schema).unwrap();
        assert!(checker.violations(&json!({"allowParallelInProgress": true})).is_empty());
        let missing = checker.violations(&json!({}));
        assert_eq!(missing.len(), 1);
        assert_eq!(missing[0].to_string(), "$.allowParallelInProgress is required");
        let typo = checker.violations(&json!({"allowParallelInProgress": false, "allowParallel": true}));
        assert_eq!(typo.len(), 1);
        assert!(typo[0].to_string().starts_with("$.allowParallel is not an allowed key"), "{}", typo[0]);
        let wrong = checker.violations(&json!({"allowParallelInProgress": "yes"}));
        assert_eq!(wrong[0].to_string(), "$.allowParallelInProgress must be a boolean, got the string \"yes\"");
    }

    #[test]
    fn config_selects_the_policy() {
        let parallel: Config = serde_json::from_str(r#"{"allowParallelInProgress":true}"#).unwrap();
        assert_eq!(parallel.policy(), Policy::Parallel);
        let single: Config = serde_json::from_str(r#"{"allowParallelInProgress":false}"#).unwrap();
        assert_eq!(single.policy(), Policy::Single);
        assert!(serde_json::from_str::<Config>("{}").is_err());
        assert!(serde_json::from_str::<Config>(r#"{"allowParallelInProgress":true,"x":1}"#).is_err());
    }

    #[test]
    fn declaration_carries_name_inject_and_schema() {
        let decl = cordis_abi::sdk::declare::<TodoPlugin>();
        assert_eq!(decl.name.as_str(), "tool-todo");
        let inject: Vec<&str> = decl.inject.iter().map(|s| s.as_str()).collect();
        assert_eq!(inject, ["tools", "projections"]);
        let schema: Value = serde_json::from_str(decl.config_schema.as_str()).unwrap();
        assert_eq!(schema, config_schema());
    }
}
