// §3 of the guide: an owned event type, appended from a tool whose reply
// is built from the encoded event.

use cordis_abi::prelude::*;

/// The tool's arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// A moment, in seconds since the epoch.
    pub at: u64,
}

/// The data of a stamp event.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stamp { at: u64 }

pub const STAMP: &str = "guide/stamp";

struct StampInvariant;
impl EventInvariant for StampInvariant {
    fn validate(&self, data: &str) -> Result<(), String> {
        serde_json::from_str::<Stamp>(data).map(|_| ()).map_err(|e| format!("not a stamp: {e}"))
    }
}

struct StampTool;

impl TypedTool for StampTool {
    type Args = Args;
    fn name(&self) -> &str { "stamp" }
    fn description(&self) -> String { "Records a stamp in the session.".into() }
    /// Answers exactly as `execute_encoded` does.
    fn execute(&self, args: Args, cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {
        let reply = self.execute_encoded(args, cx)?;
        let value = reply.value.map(|v| serde_json::from_str(v.as_str())).transpose()?;
        Ok(ToolReply { text: reply.text, value })
    }
    fn execute_encoded(&self, args: Args, cx: &ToolContext<'_>) -> Result<EncodedReply, ToolError> {
        let data = JsonText::encode(&Stamp { at: args.at })?;     // {"at":...}
        cx.append_json(STAMP, data.as_json_str())?;
        let value = data.with_member("seen", &true)?;              // {"at":...,"seen":true}
        Ok(EncodedReply { text: "stamped".into(), value: Some(value) })
    }
}

/// Owns `guide/stamp` and registers `stamp`.
pub struct Stamper;

impl Plugin for Stamper {
    const NAME: &'static str = "stamp";
    const INJECT: &'static [&'static str] = &["tools"];
    type Config = Empty;
    fn apply(ctx: &Context<'_>, _config: Empty) -> Result<(), PluginError> {
        ctx.own_event_type(STAMP, StampInvariant)?;
        ctx.tools()?.register(StampTool)
    }
}

/// No config keys.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

cordis_abi::export_plugin!(Stamper);
