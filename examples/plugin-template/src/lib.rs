//! A complete cordis plugin: a tool, an owned session event type, a
//! projection folded from the log, and a service other plugins can inject.
//!
//! - tool `greet` `{"name": TEXT}` answers with the configured greeting and
//!   appends a `hello/greeting` event to the calling agent's session;
//! - event type `hello/greeting` `{"name": TEXT}`, checked by its invariant
//!   on replay, on import and when the host appends one (this plugin's own
//!   appends are data its tool built, not checked again);
//! - projection `greetings`: how many greetings the session holds, by name;
//! - service `greeter`: `greet` `{"name": TEXT}` → `{"text": ...}`, for
//!   other plugins (`inject: [greeter]`).
//!
//! See `docs/plugins.md` in the cordis repository for the walkthrough.

use std::collections::BTreeMap;

use cordis_abi::prelude::*;
use serde_json::{json, Value};

/// The entry's config: the host validates it against this type's JSON
/// Schema before `apply` runs.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// How to greet, e.g. "Hello".
    pub greeting: String,
}

// The tool's arguments (the host checks them against their schema before
// `execute`). A `///` comment here would become the schema's description,
// which the model reads.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Who to greet.
    pub name: String,
}

/// The data of a `hello/greeting` event.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Greeting {
    /// Who was greeted.
    pub name: String,
}

/// The event type this plugin owns.
pub const GREETING: &str = "hello/greeting";

struct Greet {
    greeting: String,
}

impl TypedTool for Greet {
    type Args = Args;
    fn name(&self) -> &str {
        "greet"
    }
    fn description(&self) -> String {
        "Greets someone by name and records the greeting in the session.".into()
    }
    fn execute(&self, args: Args, cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {
        if cx.has_session() {
            cx.append(GREETING, &Greeting { name: args.name.clone() })?;
        }
        Ok(ToolReply { text: format!("{}, {}!", self.greeting, args.name), value: None })
    }
}

/// The durable-log invariant of `hello/greeting`.
struct GreetingInvariant;

impl EventInvariant for GreetingInvariant {
    fn validate(&self, data: &str) -> Result<(), String> {
        let greeting: Greeting = serde_json::from_str(data).map_err(|e| format!("not a greeting: {e}"))?;
        if greeting.name.trim().is_empty() {
            return Err("a greeting needs a name".into());
        }
        Ok(())
    }
}

/// The `greetings` projection: greetings per name.
struct Greetings;

impl Fold for Greetings {
    type State = BTreeMap<String, u64>;
    fn key(&self) -> &str {
        "greetings"
    }
    fn version(&self) -> u32 {
        1
    }
    fn types(&self) -> Vec<String> {
        vec![GREETING.into()]
    }
    fn init(&self) -> Self::State {
        BTreeMap::new()
    }
    fn apply(&self, mut state: Self::State, _event_type: &str, data: &str) -> Result<Self::State, String> {
        let greeting: Greeting = serde_json::from_str(data).map_err(|e| e.to_string())?;
        *state.entry(greeting.name).or_default() += 1;
        Ok(state)
    }
    fn render(&self, state: &Self::State) -> String {
        state.iter().map(|(name, n)| format!("{name}: {n}")).collect::<Vec<_>>().join("\n")
    }
    fn summary(&self, state: &Self::State) -> String {
        format!("{} greeted", state.len())
    }
}

/// The `greeter` service.
struct Greeter {
    greeting: String,
}

impl ServiceProvider for Greeter {
    fn call(&self, method: &str, args: Value) -> Result<Value, ServiceError> {
        match method {
            "greet" => {
                let name = args["name"].as_str().ok_or_else(|| ServiceError::new("greet takes {\"name\": TEXT}"))?;
                Ok(json!({"text": format!("{}, {name}!", self.greeting)}))
            }
            "value" => Ok(json!({"greeting": self.greeting})),
            other => Err(ServiceError::new(format!("greeter has no request `{other}`"))),
        }
    }
}

/// The plugin.
pub struct Hello;

impl Plugin for Hello {
    const NAME: &'static str = "hello";
    const INJECT: &'static [&'static str] = &["tools"];
    const PROVIDES: &'static [&'static str] = &["greeter"];
    const PACKAGES: &'static [&'static str] = &["@example/hello"];
    type Config = Config;

    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        ctx.own_event_type(GREETING, GreetingInvariant)?;
        ctx.register_projection(Greetings)?;
        ctx.tools()?.register(Greet { greeting: config.greeting.clone() })?;
        ctx.provide("greeter", Greeter { greeting: config.greeting })
    }
}

cordis_abi::export_plugin!(Hello);
cordis_abi::export_library!();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_invariant_refuses_an_empty_name() {
        assert!(GreetingInvariant.validate(r#"{"name": "Ada"}"#).is_ok());
        assert!(GreetingInvariant.validate(r#"{"name": " "}"#).is_err());
        assert!(GreetingInvariant.validate(r#"{"who": "Ada"}"#).is_err());
    }
}
