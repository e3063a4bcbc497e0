//! A plugin as an author built it against cordis-abi 1.0: a `tally` tool
//! that counts the words it is sent, records each count as an event of a
//! type it owns, and answers with the running total of its session, folded
//! by a projection. It exercises every kind of registration a 1.0 plugin
//! makes, so that a later host loading it proves the whole 1.0 surface,
//! each with values that differ in every argument, so a host that swaps two
//! of them is caught:
//!
//! - the projection refuses an event type other than `tally/count` (a
//!   host passing `data` for `event_type` folds nothing);
//! - the plugin provides `compat-join` (`join` `{"left", "right"}` →
//!   `"LEFT|RIGHT"`, any other request refused naming it), which the
//!   library's second plugin, `compat-consumer-1-0`, calls from its tool
//!   `joined`;
//! - a turn-end hook appends `tally/count` with `words` = 100 × turn +
//!   step and asks for another step only when the model's text is `again`;
//! - `apply` asks for `host.info` version 1 and for `compat.nope` version
//!   7, and logs what it got.

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

    fn apply(&self, state: u64, event_type: &str, data: &str) -> Result<u64, String> {
        if event_type != "tally/count" {
            return Err(format!("tally folds tally/count only, was given `{event_type}`"));
        }
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

struct Join;

impl ServiceProvider for Join {
    fn call(&self, method: &str, args: Value) -> Result<Value, ServiceError> {
        match method {
            "join" => match (args["left"].as_str(), args["right"].as_str()) {
                (Some(left), Some(right)) => Ok(json!(format!("{left}|{right}"))),
                _ => Err(ServiceError::new(format!("join takes {{\"left\", \"right\"}}, got {args}"))),
            },
            other => Err(ServiceError::new(format!("compat-join has no request `{other}`"))),
        }
    }
}

struct Counted;

impl TurnEnd for Counted {
    fn turn_end(&self, turn: &TurnInfo, cx: &ToolContext<'_>) -> Result<bool, String> {
        cx.append("tally/count", &json!({ "words": 100 * turn.turn + turn.step })).map_err(|e| e.0)?;
        Ok(turn.text == "again")
    }
}

/// The plugin.
pub struct CompatPlugin;

impl Plugin for CompatPlugin {
    const NAME: &'static str = "compat-plugin-1-0";
    const INJECT: &'static [&'static str] = &["tools", "agent"];
    const PROVIDES: &'static [&'static str] = &["compat-join"];
    type Config = Config;

    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        // By name and version: 1.0 knew no capability, so these are asked
        // for as a plugin would ask a newer host, optimistically.
        let host_info = Capability { name: "host.info", version: 1, since: cordis_abi::AbiVersion { major: 1, minor: 1 } };
        let info = ctx.capability(&host_info, &json!({}))?;
        let nope = Capability { name: "compat.nope", version: 7, since: cordis_abi::AbiVersion { major: 1, minor: 99 } };
        let unknown = ctx.capability(&nope, &json!({}))?;
        ctx.log(
            LogLevel::Info,
            &format!(
                "host.info@1: {}; compat.nope@7: {}",
                info.map_or("none".into(), |i| i["host"].to_string()),
                unknown.map_or("none".into(), |v| v.to_string())
            ),
        );
        ctx.own_event_type("tally/count", Counts)?;
        ctx.register_projection(Total)?;
        ctx.provide("compat-join", Join)?;
        ctx.on_turn_end(Counted)?;
        ctx.tools()?.register(Tally { prefix: config.prefix })
    }
}

/// The tool of the second plugin: joins two words through `compat-join`.
struct Joined {
    join: ServiceHandle,
}

impl TypedTool for Joined {
    type Args = Args;

    fn name(&self) -> &str {
        "joined"
    }

    fn description(&self) -> String {
        "Joins the first two words of `text` through compat-join.".into()
    }

    fn execute(&self, args: Args, _cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {
        let mut words = args.text.split_whitespace();
        let (left, right) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let joined = self.join.call("join", &json!({"left": left, "right": right})).map_err(|e| ToolError::new(e.0))?;
        Ok(ToolReply { text: joined.as_str().unwrap_or_default().to_string(), value: None })
    }
}

/// The second plugin: consumes `compat-join`.
pub struct CompatConsumer;

impl Plugin for CompatConsumer {
    const NAME: &'static str = "compat-consumer-1-0";
    const INJECT: &'static [&'static str] = &["tools", "compat-join"];
    type Config = Empty;

    fn apply(ctx: &Context<'_>, _config: Empty) -> Result<(), PluginError> {
        let join = ctx.service("compat-join")?;
        ctx.tools()?.register(Joined { join })
    }
}

/// No config keys.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

cordis_abi::export_plugin!(CompatPlugin);
cordis_abi::export_plugin!(CompatConsumer);
cordis_abi::export_library!();
