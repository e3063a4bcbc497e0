//! A plugin as an author built it against cordis-abi 1.0: a `tally` tool
//! that counts the words it is sent, records each count as an event of a
//! type it owns, and answers with the running total of its session, folded
//! by a projection. It exercises every kind of registration a 1.0 plugin
//! makes, so that a later host loading it proves the whole 1.0 surface.

use cordis_abi::prelude::*;

/// The plugin's config.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Put before every answer.
    pub prefix: String,
}

/// The tool's arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The words to count.
    pub text: String,
}

struct Tally {
    prefix: String,
}

impl TypedTool for Tally {
    type Args = Args;

    fn name(&self) -> &str {
        "tally"
    }

    fn description(&self) -> String {
        "Counts the words of `text` and records the count.".into()
    }

    fn execute(&self, args: Args, cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {
        let words = args.text.split_whitespace().count();
        let seq = if cx.has_session() { Some(cx.append("tally/count", &json!({ "words": words }))?) } else { None };
        Ok(ToolReply { text: format!("{}{words} words", self.prefix), value: Some(json!({ "words": words, "seq": seq })) })
    }
}

struct Counts;

impl EventInvariant for Counts {
    fn validate(&self, data: &str) -> Result<(), String> {
        let value: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
        value["words"].as_u64().map(|_| ()).ok_or_else(|| "a tally/count event has a whole number `words`".to_string())
    }
}

struct Total;

impl Fold for Total {
    type State = u64;

    fn key(&self) -> &str {
        "tally"
    }

    fn version(&self) -> u32 {
        1
    }

    fn types(&self) -> Vec<String> {
        vec!["tally/count".into()]
    }

    fn init(&self) -> u64 {
        0
    }

    fn apply(&self, state: u64, _event_type: &str, data: &str) -> Result<u64, String> {
        let value: Value = serde_json::from_str(data).map_err(|e| e.to_string())?;
        Ok(state + value["words"].as_u64().unwrap_or(0))
    }

    fn render(&self, state: &u64) -> String {
        format!("tallied: {state} words")
    }

    fn summary(&self, state: &u64) -> String {
        format!("{state} words tallied")
    }
}

/// The plugin.
pub struct CompatPlugin;

impl Plugin for CompatPlugin {
    const NAME: &'static str = "compat-plugin-1-0";
    const INJECT: &'static [&'static str] = &["tools"];
    type Config = Config;

    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        ctx.own_event_type("tally/count", Counts)?;
        ctx.register_projection(Total)?;
        ctx.tools()?.register(Tally { prefix: config.prefix })
    }
}

cordis_abi::export_plugin!(CompatPlugin);
cordis_abi::export_library!();
