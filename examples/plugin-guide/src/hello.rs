// §2 of the guide: a plugin with a tool.

use cordis_abi::prelude::*;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// How to greet.
    pub greeting: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Who to greet.
    pub name: String,
}

struct Greet { greeting: String }

impl TypedTool for Greet {
    type Args = Args;
    fn name(&self) -> &str { "greet" }
    fn description(&self) -> String { "Greets someone by name.".into() }
    fn execute(&self, args: Args, _cx: &ToolContext<'_>) -> Result<ToolReply, ToolError> {
        Ok(ToolReply { text: format!("{}, {}!", self.greeting, args.name), value: None })
    }
}

pub struct Hello;

impl Plugin for Hello {
    const NAME: &'static str = "hello";
    const INJECT: &'static [&'static str] = &["tools"];
    type Config = Config;
    fn apply(ctx: &Context<'_>, config: Config) -> Result<(), PluginError> {
        ctx.tools()?.register(Greet { greeting: config.greeting })
    }
}

cordis_abi::export_plugin!(Hello);
